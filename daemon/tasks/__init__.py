"""One task's run through the SDK's computer loop, its approvals, and the approval's binding to the screen."""
