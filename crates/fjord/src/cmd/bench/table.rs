//! The fresh table every benchmark run writes to: created before the timed
//! phase, dropped after it (so repeated runs do not fill the disk).

use std::time::{SystemTime, UNIX_EPOCH};

use fjord_client::{Admin, FlussClient, OffsetSpec, TableInfo, TablePath};
use fjord_format::schema::{DatabaseDescriptor, TableDescriptor};

use super::workload::{table_descriptor, Compression, SchemaKind};

/// Database holding the benchmark tables.
pub const BENCH_DATABASE: &str = "bench";

/// A connected client and the benchmark table it created.
pub struct BenchTable {
    /// The native client, connected to the bootstrap server.
    pub client: FlussClient,
    /// Its catalog client.
    pub admin: Admin,
    /// The table as the server describes it.
    pub info: TableInfo,
}

impl BenchTable {
    /// Connects to `bootstrap` and creates a table no earlier run used
    /// (partitioned by day when `partitioned`; its partitions are created by
    /// the writer as rows arrive; with the `dt` column but no partitions when
    /// `day_column` alone).
    pub async fn create(
        bootstrap: &str,
        schema: SchemaKind,
        compression: Compression,
        partitioned: bool,
        day_column: bool,
    ) -> anyhow::Result<Self> {
        Self::create_with_properties(bootstrap, schema, compression, partitioned, day_column, &[])
            .await
    }

    /// [`create`](Self::create) with extra table options (`fjord bench
    /// sql` sets `table.statistics.columns`).
    pub async fn create_with_properties(
        bootstrap: &str,
        schema: SchemaKind,
        compression: Compression,
        partitioned: bool,
        day_column: bool,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let client = FlussClient::connect(&[bootstrap.to_owned()]).await?;
        let admin = client.admin();
        admin
            .create_database(BENCH_DATABASE, &DatabaseDescriptor::default(), true)
            .await?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let path = TablePath::new(
            BENCH_DATABASE,
            format!(
                "fjord_{}{}_{}_{}_{stamp}",
                schema.name(),
                match (partitioned, day_column) {
                    (true, _) => "_by_day",
                    (false, true) => "_with_day",
                    (false, false) => "",
                },
                compression.name(),
                std::process::id()
            ),
        );
        let mut descriptor = table_descriptor(schema, compression, partitioned, day_column)?;
        if !extra.is_empty() {
            let mut properties = descriptor.properties().clone();
            properties.extend(
                extra
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            );
            descriptor = TableDescriptor::new(
                descriptor.schema().clone(),
                descriptor.comment().map(str::to_owned),
                descriptor.partition_keys().to_vec(),
                descriptor.distribution().cloned(),
                properties,
                descriptor.custom_properties().clone(),
            )?;
        }
        admin.create_table(&path, &descriptor, false).await?;
        let info = client.table_info(&path).await?;
        Ok(Self {
            client,
            admin,
            info,
        })
    }

    /// Records in the table: the sum of its buckets' high watermarks (of
    /// every partition, for a partitioned table).
    pub async fn record_count(&self) -> anyhow::Result<i64> {
        let buckets: Vec<i32> = (0..self.info.bucket_count()).collect();
        if !self.info.is_partitioned() {
            let ends = self
                .admin
                .list_offsets(&self.info, &buckets, OffsetSpec::Latest)
                .await?;
            return Ok(ends.iter().sum());
        }
        let mut total = 0;
        for partition in self.admin.list_partitions(&self.info.path, None).await? {
            let ends = self
                .admin
                .list_partition_offsets(
                    &self.info,
                    partition.partition_id,
                    &buckets,
                    OffsetSpec::Latest,
                )
                .await?;
            total += ends.iter().sum::<i64>();
        }
        Ok(total)
    }

    /// Fails unless the table holds exactly `expected` records: a benchmark
    /// of a writer that lost or duplicated data would be meaningless.
    pub async fn check_record_count(&self, expected: usize) -> anyhow::Result<()> {
        let found = self.record_count().await?;
        if found != expected as i64 {
            anyhow::bail!(
                "{} holds {found} records after the run, expected {expected}",
                self.info.path
            );
        }
        Ok(())
    }

    /// Drops the table.
    pub async fn drop(self) -> anyhow::Result<()> {
        self.admin.drop_table(&self.info.path, true).await?;
        Ok(())
    }
}
