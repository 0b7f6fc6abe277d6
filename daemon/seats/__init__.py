"""The displays tasks run on: one seat's life, which seat runs which task, and how seats are configured."""
