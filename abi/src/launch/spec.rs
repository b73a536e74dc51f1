//! [`LaunchSpec`], the JSON form of a [`LaunchDecl`] (host only).

use super::LaunchDecl;

/// The JSON form of a [`LaunchDecl`]: the manifest's `launch` field of a kernel (absent when
/// nothing is declared; each member absent when not declared).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchSpec {
    /// Upper bound of threads per block (`.maxntid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<u32>,
    /// The block shape the kernel requires (`.reqntid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<[u32; 3]>,
    /// NumPy name of the element type of the dynamic shared memory (`"float32"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_shared: Option<std::string::String>,
    /// Dimensions of the automatic grid (2 or 3; absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_dims: Option<u8>,
    /// Blocks per SM the registers allow (`.minnctapersm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_blocks: Option<u8>,
    /// `true`: the automatic grid follows the rows (`#[kernel(grid = "rows")]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_rows: Option<bool>,
    /// `true`: the kernel is launched cooperatively (`#[kernel(cooperative)]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooperative: Option<bool>,
    /// The cluster shape in blocks (`#[kernel(cluster = (x, y, z))]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<[u32; 3]>,
    /// `true`: the cluster may hold more than 8 blocks (`#[kernel(non_portable_cluster)]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_portable_cluster: Option<bool>,
    /// The dynamic shared memory (bytes) the kernel needs (`#[kernel(shared_bytes = n)]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u32>,
}

impl LaunchSpec {
    /// `true` when nothing is declared (the manifest leaves the field out).
    pub fn is_empty(&self) -> bool {
        *self == LaunchSpec::default()
    }

    /// `true` when the kernel needs a launcher that knows cooperative or cluster launches
    /// (a manifest with such a kernel is written in format 3, which older readers refuse
    /// rather than launch it the plain way).
    pub fn needs_launch_attributes(&self) -> bool {
        self.cooperative == Some(true) || self.cluster.is_some()
    }

    /// The declaration, checked (see [`LaunchDecl::check`]).
    pub fn decl(&self) -> Result<LaunchDecl, std::string::String> {
        use std::string::ToString;
        let small = |v: u32, what: &str| {
            u16::try_from(v).map_err(|_| std::format!("{what} {v} is out of range"))
        };
        let block = match self.block {
            Some(b) => [
                small(b[0], "block")?,
                small(b[1], "block")?,
                small(b[2], "block")?,
            ],
            None => [0; 3],
        };
        let dynamic_shared = match &self.dynamic_shared {
            Some(name) => crate::DType::from_name(name)
                .ok_or_else(|| std::format!("unknown dynamic shared element type `{name}`"))?
                as u8,
            None => 0,
        };
        let tiny = |v: u32| {
            u8::try_from(v).map_err(|_| std::format!("cluster extent {v} is out of range"))
        };
        let cluster = match self.cluster {
            Some(c) => [tiny(c[0])?, tiny(c[1])?, tiny(c[2])?],
            None => [0; 3],
        };
        if self.cluster.is_some_and(|c| c.contains(&0)) {
            return Err("every cluster extent must be at least 1".into());
        }
        let d = LaunchDecl {
            max_threads: small(self.max_threads.unwrap_or(0), "max_threads")?,
            block,
            dynamic_shared,
            grid_dims: self.grid_dims.unwrap_or(0),
            min_blocks: self.min_blocks.unwrap_or(0),
            grid_rows: self.grid_rows.unwrap_or(false),
            cooperative: self.cooperative.unwrap_or(false),
            cluster,
            non_portable_cluster: self.non_portable_cluster.unwrap_or(false),
            shared_bytes: self.shared_bytes.unwrap_or(0),
        };
        if self.max_threads == Some(0) || self.grid_dims == Some(0) || self.min_blocks == Some(0) {
            return Err(
                "max_threads, grid_dims and min_blocks must be at least 1 when given".into(),
            );
        }
        d.check().map_err(ToString::to_string)?;
        Ok(d)
    }
}

impl From<LaunchDecl> for LaunchSpec {
    fn from(d: LaunchDecl) -> LaunchSpec {
        LaunchSpec {
            max_threads: (d.max_threads != 0).then_some(u32::from(d.max_threads)),
            block: d.fixed_block(),
            dynamic_shared: crate::DType::from_code(d.dynamic_shared).map(|t| t.name().into()),
            grid_dims: (d.grid_dims > 1).then_some(d.grid_dims),
            min_blocks: (d.min_blocks != 0).then_some(d.min_blocks),
            grid_rows: d.grid_rows.then_some(true),
            cooperative: d.cooperative.then_some(true),
            cluster: d.cluster_dims(),
            non_portable_cluster: d.non_portable_cluster.then_some(true),
            shared_bytes: (d.shared_bytes != 0).then_some(d.shared_bytes),
        }
    }
}
