"""Auth: roles and page access, local accounts, login sessions and single sign-on."""
