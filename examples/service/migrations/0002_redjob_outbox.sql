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
    -- A unique job's lock (`<job>:<unique id>`) and how long it lasts, in ms.
    unique_key text,
    unique_ms bigint,
    -- Why the relay left the row: a duplicate of a unique job, or not a job.
    problem text,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- The rows relays claim: deleted rows and kept ones are not scanned past.
CREATE INDEX IF NOT EXISTS redjob_outbox_claim ON redjob_outbox (id) WHERE problem IS NULL;
