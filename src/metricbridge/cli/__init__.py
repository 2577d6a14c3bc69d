"""The command-line front doors.

One module per command, shared option parsing and logging set-up. The only room that may import
every other one.
"""
