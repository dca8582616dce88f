"""The general-form linearizer of equations of motion from elsewhere (Kane, Lagrange; SymPy)."""
