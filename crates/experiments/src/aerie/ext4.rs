//! ext4 on a loop device backed by a file on tmpfs: the nearest this machine has to the
//! paper's ext3 on its RAM-backed block device (SCM-disk). A journaling kernel file
//! system over memory, reached through the block layer.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted ext4 image; unmounted (and its loop device detached) on drop.
pub struct Ext4Loop {
    image: PathBuf,
    mount: PathBuf,
    mounted: bool,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Ext4Loop {
    /// Makes a sparse `bytes`-byte image under `tmpfs_dir`, builds ext4 on it and mounts
    /// it through a loop device at a new directory under `mount_parent`. The error says
    /// why that could not be done (no loop devices, mount refused, no mkfs.ext4).
    pub fn mount(tmpfs_dir: &Path, mount_parent: &Path, bytes: u64) -> Result<Ext4Loop, String> {
        if !Path::new("/dev/loop-control").exists() && !Path::new("/dev/loop0").exists() {
            return Err("no loop devices (/dev/loop-control, /dev/loop0) in this system".into());
        }
        let id = std::process::id();
        let image = tmpfs_dir.join(format!("pmlab-ext4-{id}.img"));
        let mount = mount_parent.join(format!("pmlab-ext4-{id}"));
        let f = std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        f.set_len(bytes)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        drop(f);
        let mut me = Ext4Loop {
            image,
            mount,
            mounted: false,
        };
        std::fs::create_dir_all(&me.mount).map_err(|e| format!("{}: {e}", me.mount.display()))?;
        let img = me.image.display().to_string();
        let mnt = me.mount.display().to_string();
        run("mkfs.ext4", &["-q", "-F", &img])?;
        run("mount", &["-t", "ext4", "-o", "loop", &img, &mnt])?;
        me.mounted = true;
        Ok(me)
    }

    /// Where the file system is mounted.
    pub fn path(&self) -> &Path {
        &self.mount
    }
}

impl Drop for Ext4Loop {
    fn drop(&mut self) {
        if self.mounted {
            // -d detaches the loop device mount set up.
            let _ = run("umount", &["-d", &self.mount.display().to_string()]);
        }
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.image);
    }
}
