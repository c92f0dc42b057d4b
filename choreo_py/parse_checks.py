"""Parse-level checks (placeholder)."""
def check(program):
    pass
