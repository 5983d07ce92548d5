"""Jobs named by the malformed recipes next to this file."""


def good(a, b=0, steps=1):
    return {"y": a + b}


def strict(a):
    return {"y": a}
