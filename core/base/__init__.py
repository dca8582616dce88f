"""The compiled foundation: core's ``njit``, records passed by address, factorizations that name
where a matrix is singular."""
