"""Pure address allocation: the Globalnet pool, and the Globalnet controller's allocation plan."""
