-- The job outbox: jobs dispatched in a transaction wait here until a relay moves them into
-- Redis (redjob::outbox). As redjob::outbox::Outbox::default().schema() gives it.
CREATE TABLE IF NOT EXISTS redjob_outbox (
    -- The claim order: relays take the oldest rows first.
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uuid uuid NOT NULL UNIQUE,
    queue text NOT NULL,
    job text NOT NULL,
    -- The job as the relay pushes it: where it goes, when it is due, its payload.
    link text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
