/*
 * saferet.S - a userspace copy of the shape of the kernel's AMD SRSO "Safe RET"
 * return thunk (arch/x86/lib/retpoline.S): every "ret" of code built with
 * -mfunction-return=thunk-extern becomes "jmp __x86_return_thunk", which
 * calls a stub that drops its own return address and returns to the real
 * caller; the return stack predicts the ud2, so each return mispredicts.
 */
	.text
	.p2align 6
bench_srso_safe_ret:
	lea 8(%rsp), %rsp
	ret
	int3

	.p2align 6
	.globl __x86_return_thunk
	.type __x86_return_thunk, @function
__x86_return_thunk:
	call bench_srso_safe_ret
	ud2
	.size __x86_return_thunk, .-__x86_return_thunk

	.section .note.GNU-stack,"",@progbits
