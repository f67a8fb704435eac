"""What is measured and judged: one module per scenario, each with a ``main(argv)``, run by
``python -m loadtest <scenario>`` (:mod:`loadtest.__main__`)."""
