"""Reports: the HTML/Markdown report, figures and terminal tables."""
