-- The stack's PostgreSQL, set up once on an empty data directory: the postgres image's
-- entrypoint runs this file with psql as POSTGRES_USER, in POSTGRES_DB (shop), stopping at the
-- first error (ON_ERROR_STOP). tests/integration/docker runs it the same way against the test
-- server. The server itself runs with wal_level=logical (compose.yaml, `command:`).
--
-- Passwords are the demo's (compose.yaml gives the same ones to Airflow's connections and to
-- Kafka Connect): change them in both places for anything but a laptop.

-- The role that captures: the engine (connection pg_shop) and Debezium on Kafka Connect. It may
-- open replication connections and create its slot; it reads the captured tables and writes
-- the signal table (signals, and the watermarks of incremental snapshots). Not a superuser.
create role cdc login replication password 'cdc';

create table customers (
    id int primary key,
    name text not null,
    email text,
    updated_at timestamptz not null default now()
);

create table orders (
    id int primary key,
    customer_id int not null references customers (id),
    status text not null,
    amount numeric(10, 2) not null,
    updated_at timestamptz not null default now()
);

-- example_snapshot_backfill re-snapshots the rows whose updated_at falls in a day.
create function touch_updated_at() returns trigger language plpgsql as $$
begin
    new.updated_at := now();
    return new;
end
$$;
create trigger customers_touch before update on customers for each row execute function touch_updated_at();
create trigger orders_touch before update on orders for each row execute function touch_updated_at();

-- Debezium's signal table (signal.data.collection: public.debezium_signal).
create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048));

insert into customers (id, name, email, updated_at)
select g, 'customer ' || g, 'customer' || g || '@example.com', timestamptz '2026-01-01 00:00:00+00' + g * interval '1 hour'
from generate_series(1, 100) g;

insert into orders (id, customer_id, status, amount, updated_at)
select g,
       1 + g % 100,
       case when g % 3 = 0 then 'open' else 'done' end,
       (g % 500) + 0.99,
       timestamptz '2026-01-01 00:00:00+00' + (g % 10) * interval '1 day' + g * interval '1 second'
from generate_series(1, 5000) g;

grant select on customers, orders to cdc;
grant select, insert, update, delete on debezium_signal to cdc;

-- One publication for both captures. Creating one FOR ALL TABLES needs a superuser, so it is
-- made here and the captures run with publication.autocreate.mode=disabled; table.include.list
-- picks the tables.
create publication dbz_publication for all tables;

-- Airflow's metadata database (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN).
create role airflow login password 'airflow';
create database airflow owner airflow;

-- The replica the Spark apply job writes (connection pg_shop_replica): the source's tables with
-- the same primary keys, owned by the role that applies (the job adds a _cdc_position column).
-- No foreign key: tables apply in parallel lanes, each in its own source order.
create role apply login password 'apply';
create database shop_replica owner apply;

\connect shop_replica
set role apply;

create table customers (
    id int primary key,
    name text not null,
    email text,
    updated_at timestamptz not null
);

create table orders (
    id int primary key,
    customer_id int not null,
    status text not null,
    amount numeric(10, 2) not null,
    updated_at timestamptz not null
);
