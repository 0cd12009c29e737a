-- Runs once, on an empty data directory. MYSQL_USER already has ALL on the shop database;
-- add what the binlog connector needs server-wide (Debezium's documented grants).
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'tidemark'@'%';
FLUSH PRIVILEGES;

USE shop;
CREATE TABLE IF NOT EXISTS customers (
  id INT PRIMARY KEY AUTO_INCREMENT,
  name VARCHAR(255) NOT NULL,
  email VARCHAR(255),
  phone VARCHAR(32),
  created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);
CREATE TABLE IF NOT EXISTS orders (
  id BIGINT PRIMARY KEY AUTO_INCREMENT,
  customer_id INT NOT NULL,
  amount DECIMAL(12, 2) NOT NULL,
  placed_at DATETIME(3) NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES customers (id)
);
INSERT INTO customers (name, email, phone) VALUES ('Ada', 'ada@example.com', '+44 20 7946 0000');
