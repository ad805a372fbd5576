"""The project's own rules, read from the repository as a whole: the layers of the imports, the
lanes of the suite, every link and named file resolving, every option documented, the README's
commands running as copied (and in order, from a copy of the checkout), the browser tests
waiting on conditions."""
