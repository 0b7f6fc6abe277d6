"""cuctl eval's suite: the specs it runs (plan), its results and summary (results), JUnit XML (junit), the HTML index (index)."""
