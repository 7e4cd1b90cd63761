"""The one exception type that means "the user asked for something we cannot do".

Entry points catch it and print a single line naming the flag and the fix, with exit status 2
(argparse's convention). Anything else that escapes is a bug and keeps its traceback.
"""


class UsageError(Exception):
    """Bad input from the command line; `flag` is the option to change."""

    def __init__(self, flag, message):
        super().__init__(f"{flag}: {message}" if flag else message)
        self.flag = flag
