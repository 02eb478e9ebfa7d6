"""The one exception type the CLI turns into a clear message and a non-zero exit."""


class MeminitError(Exception):
    """A failure the user must see, with what failed and where to look."""
