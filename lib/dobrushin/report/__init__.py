"""The report: the paper's claims, tables, figures, display names and the summary; reads the store."""
