//! The volume's page size and how a place on the media is named. A leaf module: errors
//! ([`crate::error`]) and the page structures ([`crate::media`]) both name places.

/// Size of a page, the unit of allocation of metadata and of file data.
pub const PAGE: u64 = 4096;

/// Where on the media a problem lies: a page of the metadata space and a byte in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Page number in the metadata space.
    pub page: u64,
    /// Byte offset inside the page.
    pub offset: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "page {} (byte {:#x})",
            self.page,
            self.page * PAGE + self.offset
        )
    }
}
