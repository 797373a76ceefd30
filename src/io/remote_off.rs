//! Builds without the `remote` feature (the fuzz targets): no object-store stack. A remote store
//! is a type with no values, so `Store::Remote` and `DataSource::Remote` cannot be made and
//! every method below is unreachable by construction (`match *self {}`), not a stand-in that
//! answers: the code that handles remote datasets compiles unchanged and never runs.

use std::ops::Range;
use std::path::Path;

use bytes::Bytes;

use crate::error::Result;

/// An object store; has no values in this build.
#[derive(Debug)]
pub enum RemoteStore {}

/// The settings a remote store is read with (only what code outside `remote` looks at).
#[derive(Debug)]
pub struct RemoteSettings {
    pub concurrency: usize,
}

impl RemoteStore {
    pub fn settings(&self) -> &RemoteSettings {
        match *self {}
    }
    pub fn url_of(&self, _name: &str) -> String {
        match *self {}
    }
    pub fn list(&self) -> Result<Vec<(String, u64)>> {
        match *self {}
    }
    pub fn list_in(&self, _dir: &str) -> Result<Vec<String>> {
        match *self {}
    }
    pub fn size(&self, _name: &str) -> Result<u64> {
        match *self {}
    }
    pub fn read_all(&self, _name: &str) -> Result<Bytes> {
        match *self {}
    }
    pub fn read_range(&self, _name: &str, _range: Range<u64>) -> Result<Bytes> {
        match *self {}
    }
    pub fn read_ranges(
        &self,
        _name: &str,
        _ranges: &[Range<u64>],
        _each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        match *self {}
    }
    pub fn read_named_ranges(
        &self,
        _items: &[(String, Range<u64>)],
        _each: impl FnMut(usize, Result<Bytes>),
    ) -> Result<()> {
        match *self {}
    }
    pub fn prefetch(&self, _items: &[(String, Range<u64>)]) -> Result<()> {
        match *self {}
    }
    pub fn invalidate(&self, _name: &str, _ranges: &[Range<u64>]) {
        match *self {}
    }
    pub fn forget(&self, _name: &str) {
        match *self {}
    }
    pub fn put_file(&self, _name: &str, _src: &Path) -> Result<()> {
        match *self {}
    }
    pub fn put_new(&self, _name: &str, _bytes: Vec<u8>) -> Result<bool> {
        match *self {}
    }
    pub fn delete(&self, _name: &str) -> Result<()> {
        match *self {}
    }
    pub fn read_versioned(&self, _name: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        match *self {}
    }
    pub fn put_replacing(
        &self,
        _name: &str,
        _bytes: Vec<u8>,
        _expected: Option<&ObjectVersion>,
    ) -> Result<bool> {
        match *self {}
    }
}

/// Without the `remote` feature no object has a version.
#[derive(Clone, Debug)]
pub enum ObjectVersion {}
