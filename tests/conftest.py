"""Fixtures shared by the whole suite live in tests/support/, one module per real dependency."""

pytest_plugins = [
    "tests.support.spec",
    "tests.support.spark",
    "tests.support.broker",
    "tests.support.databases",
    "tests.support.browser",
]
