-- Runs once, on an empty data directory, in the inventory database as the tidemark superuser.
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS citext;

CREATE TABLE IF NOT EXISTS customers (
  id serial PRIMARY KEY,
  name text NOT NULL,
  email citext,
  internal_notes text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS products (
  id serial PRIMARY KEY,
  name text NOT NULL,
  description text,
  attributes hstore,
  price numeric(12, 2) NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
  id bigserial PRIMARY KEY,
  customer_id int NOT NULL REFERENCES customers (id),
  product_id int NOT NULL REFERENCES products (id),
  quantity int NOT NULL,
  placed_at timestamptz NOT NULL DEFAULT now()
);
-- Full before-images for updates and deletes.
ALTER TABLE customers REPLICA IDENTITY FULL;

INSERT INTO customers (name, email) VALUES ('Ada', 'ada@example.com');
INSERT INTO products (name, description, attributes, price) VALUES ('Widget', 'A widget', 'colour=>blue', 9.99);
