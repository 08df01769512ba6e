"""The dashboard's screens: the main screen and its modal dialogs."""
