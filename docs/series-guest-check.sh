#!/bin/sh
# guest-side checks for the meminit series (run by vng --exec)
D=/sys/kernel/debug/zone_device
exec 2>&1
mount -t debugfs none /sys/kernel/debug 2>/dev/null
echo "== mode file"
cat $D/memmap_init_mode
echo streaming > $D/memmap_init_mode; cat $D/memmap_init_mode
echo bogus > $D/memmap_init_mode; echo "write bogus rc=$?"; cat $D/memmap_init_mode
echo template > $D/memmap_init_mode; cat $D/memmap_init_mode
echo 'func memmap_init_zone_device +p' > /sys/kernel/debug/dynamic_debug/control
echo "== hash refuses non-device ranges"
echo "0x1000 16" > $D/memmap_hash; echo "write ram range rc=$?"
hashloop() {
	# the data PFNs of the namespace: $2 is the nd device that owns them
	if [ -e /sys/bus/nd/devices/$2/resource ]; then
		s=$(cat /sys/bus/nd/devices/$2/resource); sz=$(cat /sys/bus/nd/devices/$2/size)
	else
		line=$(grep 'namespace0.0' /proc/iomem | head -1 | tr -d ' ')
		range=${line%%:*}; s=0x${range%-*}; e=0x${range#*-}; sz=$(( e + 1 - s ))
	fi
	spfn=$(( s >> 12 )); nr=$(( sz >> 12 ))
	echo "$2 resource $s size $sz: start_pfn $spfn nr $nr"
	for mode in slow template streaming slow template; do
		echo $mode > $D/memmap_init_mode
		ndctl disable-namespace namespace0.0 >/dev/null
		ndctl enable-namespace namespace0.0 >/dev/null
		echo "$spfn $nr" > $D/memmap_hash || echo "hash write failed"
		echo "hash $1 $mode $(cat $D/memmap_hash)"
		dmesg | grep 'memmap_init_zone_device initialised' | tail -1
	done
}
echo "== fsdax map=dev"
ndctl create-namespace -f -e namespace0.0 --mode=fsdax --map=dev
hashloop fsdax-dev pfn0.0
echo "== fsdax map=mem"
ndctl create-namespace -f -e namespace0.0 --mode=fsdax --map=mem
hashloop fsdax-mem namespace0.0
echo "== devdax align=2M"
ndctl create-namespace -f -e namespace0.0 --mode=devdax --align=2M
hashloop devdax-2M dax0.0
echo template > $D/memmap_init_mode
dmesg | grep memmap_init_zone_device
