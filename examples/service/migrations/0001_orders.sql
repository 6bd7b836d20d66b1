-- The orders the service takes: placed by POST /orders, confirmed and shipped by its jobs.
CREATE TABLE orders (
    id BIGSERIAL PRIMARY KEY,
    item TEXT NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    -- placed, confirmed, shipped, or shipping_failed
    status TEXT NOT NULL DEFAULT 'placed',
    tracking TEXT,
    -- Why shipping failed, for an order that is shipping_failed.
    problem TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
