"""Built-in reporters: views of the session log on the terminal or as a JSON stream."""
