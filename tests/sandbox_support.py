"""Hostile skill sources both the sandbox's unit tests and the env server's hardening tests refuse."""

DEEP_NESTING = {  # an expression per id, nested past the checker's limit: each must be refused, never crash
    "parens300": "(" * 300 + "1" + ")" * 300,
    "binop500": "1+(" * 500 + "1" + ")" * 500,
    "lists150": "[" * 150 + "1" + "]" * 150,
    "calls150": "f(" * 150 + "1" + ")" * 150,
    "sum5000": "1+" * 5000 + "1",
    "unary5000": "-" * 5000 + "1",
    "attributes3000": "agent" + ".x" * 3000,
    "subscripts3000": "a" + "[0]" * 3000,
    "not3000": "not " * 3000 + "x",
}
