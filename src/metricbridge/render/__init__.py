"""Text, Markdown and JSON rendering of reports, findings and diffs for the command line."""
