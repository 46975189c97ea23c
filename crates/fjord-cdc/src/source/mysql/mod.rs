//! MySQL/MariaDB snapshot + binlog source (owned by the cdc-source helper; placeholder until it lands).
