-- The stack's MariaDB, set up once on an empty data directory: the mariadb image's entrypoint
-- runs this file with the mariadb client as root, in MARIADB_DATABASE (shop).
-- tests/integration/docker runs it the same way against the test server. The binlog (ROW, full
-- row images and metadata, GTID strict mode) is set on the server's command line (compose.yaml).
--
-- The password is the demo's (compose.yaml gives Kafka Connect the same one): change both for
-- anything but a laptop.

create table customers (
    id int primary key,
    name varchar(100) not null,
    email varchar(200),
    updated_at timestamp(6) not null default current_timestamp(6) on update current_timestamp(6)
);

create table orders (
    id int primary key,
    customer_id int not null,
    status varchar(16) not null,
    amount decimal(10, 2) not null,
    updated_at timestamp(6) not null default current_timestamp(6) on update current_timestamp(6),
    constraint orders_customer foreign key (customer_id) references customers (id)
);

-- Debezium's signal table (signal.data.collection: shop.debezium_signal).
create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048));

-- seq_1_to_N: MariaDB's Sequence storage engine.
insert into customers (id, name, email, updated_at)
select seq, concat('customer ', seq), concat('customer', seq, '@example.com'),
       timestamp '2026-01-01 00:00:00' + interval seq hour
from seq_1_to_100;

insert into orders (id, customer_id, status, amount, updated_at)
select seq, 1 + seq % 100, if(seq % 3 = 0, 'open', 'done'), seq % 500 + 0.99,
       timestamp '2026-01-01 00:00:00' + interval seq % 10 day + interval seq second
from seq_1_to_5000;

-- The capturing user (Debezium's MariaDB connector on Kafka Connect): Debezium's documented
-- grants - read the tables and the binlog, lock for the initial snapshot, follow the binlog as a
-- replica - and write the signal table (signals, and the watermarks of incremental snapshots).
create user 'cdc'@'%' identified by 'cdc';
grant select, reload, show databases, lock tables, replication slave, replication client on *.* to 'cdc'@'%';
grant insert, update, delete on debezium_signal to 'cdc'@'%';

-- The replica the Spark apply job writes (connection mariadb_shop_replica): the source's tables
-- with the same primary keys, written by the user that applies (the job adds a _cdc_position
-- column). No foreign key: tables apply in parallel lanes, each in its own source order.
create database shop_replica;

create table shop_replica.customers (
    id int primary key,
    name varchar(100) not null,
    email varchar(200),
    updated_at timestamp(6) not null default current_timestamp(6)
);

create table shop_replica.orders (
    id int primary key,
    customer_id int not null,
    status varchar(16) not null,
    amount decimal(10, 2) not null,
    updated_at timestamp(6) not null default current_timestamp(6)
);

create user 'apply'@'%' identified by 'apply';
grant select, insert, update, delete, alter on shop_replica.* to 'apply'@'%';
