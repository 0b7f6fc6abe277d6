"""Small dialogs (buttons and a text entry) on GTK, Qt and Chromium for the target tests.

Each reports what the toolkit itself saw: which button was activated and which
entry received text, so a test can check that the element cud named for an
action is the one that got it.
"""
