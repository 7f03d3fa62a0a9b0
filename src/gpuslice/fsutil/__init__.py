"""File-system helpers every layer may use (the bottom of the stack): import the module you need."""
