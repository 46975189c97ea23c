//! INSERT INTO a Fjord table: the query's batches go through the native
//! writer — the append writer for a log table (whole Arrow batches, split
//! per bucket by the writer), the upsert writer for a primary-key table
//! (row by row, each an upsert). The statement ends when every row is
//! acknowledged (the writer flushed and closed), and answers the count.

use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, SendableRecordBatchStream,
};
use fjord_client::{ScanRows, TableInfo, WriterConfig};
use fjord_format::arrow_schema::to_arrow_schema;
use futures::StreamExt;

use crate::error::{client_err, SqlError};
use crate::table::TableServices;

/// The plan of `INSERT INTO table <input>`.
pub(crate) fn plan(
    services: Arc<TableServices>,
    table: TableInfo,
    input: Arc<dyn ExecutionPlan>,
    op: InsertOp,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    if op != InsertOp::Append {
        return Err(SqlError::Unsupported(format!(
            "INSERT {op} into {}: Fjord tables take INSERT INTO (appends to a log table, upserts to a primary-key table)",
            table.path
        ))
        .into_datafusion());
    }
    let schema = to_arrow_schema(table.descriptor.schema());
    let sink = Arc::new(FjordSink {
        services,
        table,
        schema,
    });
    Ok(Arc::new(DataSinkExec::new(input, sink, None)))
}

struct FjordSink {
    services: Arc<TableServices>,
    table: TableInfo,
    schema: SchemaRef,
}

impl fmt::Debug for FjordSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FjordSink({})", self.table.path)
    }
}

impl DisplayAs for FjordSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.table.descriptor.has_primary_key() {
            "upsert"
        } else {
            "append"
        };
        write!(f, "FjordSink: {how} into {}", self.table.path)
    }
}

#[async_trait]
impl DataSink for FjordSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let client = &self.services.client;
        let path = &self.table.path;
        let mut count = 0u64;
        if self.table.descriptor.has_primary_key() {
            let mut writer = client
                .upsert_writer(path, WriterConfig::default())
                .await
                .map_err(client_err)?;
            while let Some(batch) = data.next().await {
                let batch = self.conform(batch?)?;
                let rows = ScanRows::new(&batch).map_err(client_err)?;
                for row in &rows {
                    writer.upsert(&row).await.map_err(client_err)?;
                }
                count += batch.num_rows() as u64;
            }
            writer.flush().await.map_err(client_err)?;
            writer.close().await.map_err(client_err)?;
        } else {
            let mut writer = client
                .append_writer(path, WriterConfig::default())
                .await
                .map_err(client_err)?;
            while let Some(batch) = data.next().await {
                let batch = self.conform(batch?)?;
                if batch.num_rows() == 0 {
                    continue;
                }
                count += batch.num_rows() as u64;
                writer.append_batch(batch).await.map_err(client_err)?;
            }
            writer.flush().await.map_err(client_err)?;
            writer.close().await.map_err(client_err)?;
        }
        Ok(count)
    }
}

impl FjordSink {
    /// The batch with the table's Arrow schema (its nullability and
    /// field metadata), which also checks NOT NULL columns.
    fn conform(&self, batch: RecordBatch) -> DfResult<RecordBatch> {
        RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec()).map_err(|e| {
            SqlError::Invalid(format!("INSERT INTO {}: {e}", self.table.path)).into_datafusion()
        })
    }
}
