-- The admin console's password sign-in: a user's password as an argon2 PHC string (salt and
-- parameters inside), never the password itself. NULL: the user cannot sign in with one.
ALTER TABLE users ADD COLUMN password_hash TEXT;
