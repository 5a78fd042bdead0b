// SPDX-License-Identifier: MIT OR Apache-2.0
//! Devices: whether a GPU is usable, how many, and what each one is.

use crate::error::{check, out_param, Result};
use crate::library::api;
use crate::sys;

/// What the driver reports about one device (`tf_device_properties`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    pub ordinal: i32,
    /// e.g. "NVIDIA H200".
    pub name: String,
    /// The device UUID's 16 bytes.
    pub uuid: [u8; 16],
    /// (major, minor), e.g. (9, 0).
    pub compute_capability: (i32, i32),
    pub total_memory_bytes: u64,
    pub multiprocessor_count: i32,
    pub pci_domain_id: i32,
    pub pci_bus_id: i32,
    pub pci_device_id: i32,
}

impl DeviceProperties {
    /// The UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
    pub fn uuid_string(&self) -> String {
        let hex: Vec<String> = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            hex[0..4].concat(),
            hex[4..6].concat(),
            hex[6..8].concat(),
            hex[8..10].concat(),
            hex[10..16].concat()
        )
    }

    fn from_raw(p: &sys::tf_device_properties) -> Self {
        let name: Vec<u8> = p.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        DeviceProperties {
            ordinal: p.ordinal,
            name: String::from_utf8_lossy(&name).into_owned(),
            uuid: p.uuid,
            compute_capability: (p.compute_capability_major, p.compute_capability_minor),
            total_memory_bytes: p.total_memory_bytes,
            multiprocessor_count: p.multiprocessor_count,
            pci_domain_id: p.pci_domain_id,
            pci_bus_id: p.pci_bus_id,
            pci_device_id: p.pci_device_id,
        }
    }

    /// Fill an initialised `tf_device_properties` with `query`.
    pub(crate) fn query(
        lib: &sys::Library,
        query: impl FnOnce(*mut sys::tf_device_properties) -> sys::tf_status,
    ) -> Result<Self> {
        // SAFETY: the struct's own init.
        let mut raw = unsafe { sys::initialised(lib.tf_device_properties_init) };
        check(query(&mut raw))?;
        Ok(Self::from_raw(&raw))
    }
}

/// Whether this process can use a CUDA device (a runtime on device 0 can be
/// created and synchronized).  Never fails; use it to skip GPU work.  False
/// when libtenferro_gpu.so.1 is not there ([`crate::load`] says why).
pub fn gpu_available() -> bool {
    let Ok(lib) = api() else { return false };
    // SAFETY: no arguments.
    unsafe { lib.tf_gpu_available() != 0 }
}

/// Number of CUDA devices (0 when the driver reports none).  Creates no
/// context.  Errors: DriverNotFound, DriverStub, DriverTooOld,
/// NotSupported, Cuda, LibraryNotFound (no libtenferro_gpu.so.1).
pub fn device_count() -> Result<i32> {
    let lib = api()?;
    // SAFETY: a valid out pointer.
    out_param(|out| unsafe { lib.tf_device_count(out) })
}

/// Properties of device `ordinal`.  Creates no context.  Errors:
/// DeviceUnavailable (no such ordinal; the message lists the devices),
/// InvalidArgument (negative), and those of [`device_count`].
pub fn device_info(ordinal: i32) -> Result<DeviceProperties> {
    let lib = api()?;
    // SAFETY: `out` is an initialised struct owned by `query`.
    DeviceProperties::query(lib, |out| unsafe { lib.tf_device_info(ordinal, out) })
}

/// Properties of every device, in ordinal order.
pub fn devices() -> Result<Vec<DeviceProperties>> {
    (0..device_count()?).map(device_info).collect()
}
