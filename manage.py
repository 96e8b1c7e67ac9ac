#!/usr/bin/env python
"""Django's command-line utility for Ratchet (``python manage.py help`` lists the commands)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``manage.py runs | head``): that is how a pipe ends, not an error
        # worth a traceback. Python's own advice for this case: point stdout at devnull so the
        # interpreter's final flush cannot raise again, and exit as a SIGPIPE'd process would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)


if __name__ == "__main__":
    main()
