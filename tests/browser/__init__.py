"""Browser tests: the widgets in JupyterLab and the sweep report, in Debian's Chromium."""
