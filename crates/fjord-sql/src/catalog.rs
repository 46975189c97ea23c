//! The catalog: every Fjord database is a schema of the one catalog
//! [`CATALOG_NAME`], every table a table of it (`db.table` in SQL).
//!
//! DataFusion asks for schema and table *names* synchronously, so the
//! names are kept in a [`NameCache`] refreshed from the coordinator
//! (ListDatabases, ListTables) before each statement
//! ([`FjordCatalog::refresh`]) and after each DDL statement. A *table* is
//! always resolved fresh (GetTableInfo), so a query sees the schema the
//! table has when the query is planned, even one created or altered since
//! the names were listed.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::Result as DfResult;
use fjord_client::{ClientError, FlussClient, TablePath};
use fjord_proto::ErrorCode;

use crate::error::client_err;
use crate::table::{FjordTable, TableServices};

/// The catalog's name in SQL (`fjord.db.table`); on Postgres, the database.
pub const CATALOG_NAME: &str = "fjord";

/// Database and table names as last listed.
#[derive(Debug, Default)]
struct NameCache {
    databases: BTreeMap<String, Vec<String>>,
}

/// Fjord's databases as DataFusion schemas.
#[derive(Debug)]
pub struct FjordCatalog {
    services: Arc<TableServices>,
    names: Arc<RwLock<NameCache>>,
    /// Schemas a front end adds beside the databases (`pg_catalog`).
    extra: RwLock<BTreeMap<String, Arc<dyn SchemaProvider>>>,
}

impl FjordCatalog {
    /// A catalog over `services`' client; call [`FjordCatalog::refresh`]
    /// before the first statement.
    pub(crate) fn new(services: Arc<TableServices>) -> Self {
        Self {
            services,
            names: Arc::new(RwLock::new(NameCache::default())),
            extra: RwLock::new(BTreeMap::new()),
        }
    }

    fn client(&self) -> &FlussClient {
        &self.services.client
    }

    /// Lists databases and their tables again (1 + databases requests to
    /// the coordinator).
    pub async fn refresh(&self) -> Result<(), ClientError> {
        let admin = self
            .client()
            .coordinator()
            .await
            .map(fjord_client::Admin::new)?;
        let mut databases = BTreeMap::new();
        for database in admin.list_databases().await? {
            let tables = match admin.list_tables(&database).await {
                Ok(tables) => tables,
                // Dropped between the two listings.
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(e),
            };
            databases.insert(database, tables);
        }
        self.names
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .databases = databases;
        Ok(())
    }

    /// Whether the database is known (as of the last refresh).
    pub fn has_database(&self, name: &str) -> bool {
        self.names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .databases
            .contains_key(name)
    }
}

/// Whether a client error says the database or table does not exist.
pub(crate) fn is_not_found(e: &ClientError) -> bool {
    matches!(e, ClientError::Server { error, .. }
        if matches!(error.code(), ErrorCode::DatabaseNotExist | ErrorCode::TableNotExist))
}

impl CatalogProvider for FjordCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .databases
            .keys()
            .cloned()
            .collect();
        names.extend(
            self.extra
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned(),
        );
        names
    }

    fn register_schema(
        &self,
        name: &str,
        schema: Arc<dyn SchemaProvider>,
    ) -> DfResult<Option<Arc<dyn SchemaProvider>>> {
        Ok(self
            .extra
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), schema))
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if let Some(extra) = self
            .extra
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Some(Arc::clone(extra));
        }
        self.has_database(name).then(|| {
            Arc::new(FjordDatabase {
                name: name.to_owned(),
                services: Arc::clone(&self.services),
                names: Arc::clone(&self.names),
            }) as Arc<dyn SchemaProvider>
        })
    }
}

/// One Fjord database as a DataFusion schema.
#[derive(Debug)]
struct FjordDatabase {
    name: String,
    services: Arc<TableServices>,
    names: Arc<RwLock<NameCache>>,
}

#[async_trait]
impl SchemaProvider for FjordDatabase {
    fn table_names(&self) -> Vec<String> {
        self.names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .databases
            .get(&self.name)
            .cloned()
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let path = TablePath::new(&self.name, name);
        match self.services.client.refresh_table_info(&path).await {
            Ok(info) => Ok(Some(Arc::new(FjordTable::new(
                Arc::clone(&self.services),
                info,
            )?))),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(client_err(e)),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.table_names().iter().any(|t| t == name)
    }
}
