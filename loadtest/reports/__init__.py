"""The Markdown reports and charts written from the scenarios' records."""
