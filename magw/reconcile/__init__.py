"""Pure diff engine and the reconciler loop."""
