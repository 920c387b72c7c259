//! A machine made on buffers another machine gave back is the machine made on fresh
//! ones: nothing of the earlier run's bytes survives into the new one.

use pmlab_model::{Machine, MachineConfig};

#[test]
fn a_machine_on_reused_buffers_starts_from_its_image_alone() {
    let cfg = MachineConfig::loc(1 << 20);
    let image: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    let mut first = Machine::with_image(cfg.clone(), image.clone()).unwrap();
    first.coherent_write(4096, &[0xee; 64]);
    let (durable, current) = first.into_images();
    assert_eq!(
        &current[4096..4160],
        &[0xee; 64],
        "the spare holds the old run"
    );
    let mut fresh = durable;
    fresh.copy_from_slice(&image);
    let reused = Machine::with_image_reusing(cfg.clone(), fresh, current).unwrap();
    let new = Machine::with_image(cfg, image.clone()).unwrap();
    assert_eq!(reused.current_image(), &image[..]);
    assert_eq!(reused.current_image(), new.current_image());
    assert_eq!(reused.durable().image(), new.durable().image());
    assert_eq!(reused.cycles(), new.cycles());
}
