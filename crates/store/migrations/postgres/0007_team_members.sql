-- Who belongs to a team and with which role (LiteLLM's `members_with_roles`): `admin` (a team
-- admin manages the team's keys and members) or `user`.
CREATE TABLE team_members (
    team_id  TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    role     TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members (user_id);
