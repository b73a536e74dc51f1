use super::*;
use crate::DType;

#[cfg(feature = "std")]
#[test]
fn json_form() {
    let d = LaunchDecl {
        block: [16, 16, 1],
        dynamic_shared: DType::F32 as u8,
        grid_dims: 2,
        ..LaunchDecl::default()
    };
    let spec = LaunchSpec::from(d);
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        json,
        r#"{"block":[16,16,1],"dynamic_shared":"float32","grid_dims":2}"#
    );
    let back: LaunchSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back.decl(), Ok(d));
    assert!(LaunchSpec::from(LaunchDecl::default()).is_empty());
    let m = LaunchSpec::from(LaunchDecl {
        max_threads: 128,
        ..LaunchDecl::default()
    });
    assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"max_threads":128}"#);
    let occupancy = LaunchDecl {
        block: [256, 1, 1],
        min_blocks: 2,
        ..LaunchDecl::default()
    };
    let json = serde_json::to_string(&LaunchSpec::from(occupancy)).unwrap();
    assert_eq!(json, r#"{"block":[256,1,1],"min_blocks":2}"#);
    let back: LaunchSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back.decl(), Ok(occupancy));
    let rows = LaunchDecl {
        grid_rows: true,
        ..LaunchDecl::default()
    };
    let json = serde_json::to_string(&LaunchSpec::from(rows)).unwrap();
    assert_eq!(json, r#"{"grid_rows":true}"#);
    let back: LaunchSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back.decl(), Ok(rows));
    assert_eq!(
        serde_json::from_str::<LaunchSpec>(r#"{"grid_rows":false}"#)
            .unwrap()
            .decl(),
        Ok(LaunchDecl::default())
    );
    let coop = LaunchDecl {
        cooperative: true,
        ..LaunchDecl::default()
    };
    let spec = LaunchSpec::from(coop);
    assert!(spec.needs_launch_attributes());
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(json, r#"{"cooperative":true}"#);
    assert_eq!(
        serde_json::from_str::<LaunchSpec>(&json).unwrap().decl(),
        Ok(coop)
    );
    let cl = LaunchDecl {
        cluster: [16, 1, 1],
        non_portable_cluster: true,
        ..LaunchDecl::default()
    };
    let spec = LaunchSpec::from(cl);
    assert!(spec.needs_launch_attributes());
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(json, r#"{"cluster":[16,1,1],"non_portable_cluster":true}"#);
    assert_eq!(
        serde_json::from_str::<LaunchSpec>(&json).unwrap().decl(),
        Ok(cl)
    );
    assert!(!LaunchSpec::from(occupancy).needs_launch_attributes());
    for bad in [
        r#"{"max_threads":0}"#,
        r#"{"max_threads":70000}"#,
        r#"{"block":[0,1,1]}"#,
        r#"{"block":[16,16,1],"max_threads":256}"#,
        r#"{"dynamic_shared":"float128"}"#,
        r#"{"grid_dims":5}"#,
        r#"{"min_blocks":2}"#,
        r#"{"max_threads":256,"min_blocks":0}"#,
        r#"{"max_threads":1024,"min_blocks":3}"#,
        r#"{"grid_dims":2,"grid_rows":true}"#,
        r#"{"cluster":[2,0,1]}"#,
        r#"{"cluster":[256,1,1]}"#,
        r#"{"cluster":[4,4,1]}"#,
        r#"{"non_portable_cluster":true}"#,
        r#"{"cooperative":true,"cluster":[2,1,1]}"#,
        r#"{"cooperative":true,"grid_dims":3}"#,
    ] {
        let spec: LaunchSpec = serde_json::from_str(bad).unwrap();
        assert!(spec.decl().is_err(), "{bad}");
    }
}

#[test]
fn records_round_trip() {
    let cases = [
        LaunchDecl::default(),
        LaunchDecl {
            max_threads: 256,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [16, 16, 1],
            dynamic_shared: DType::F32 as u8,
            grid_dims: 2,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [8, 8, 16],
            grid_dims: 3,
            dynamic_shared: DType::BF16 as u8,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            max_threads: 256,
            min_blocks: 2,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            grid_rows: true,
            ..LaunchDecl::default()
        },
    ];
    for d in cases {
        let bytes = d.encode();
        assert_eq!(LaunchDecl::decode(&bytes), Ok(d));
        for cut in 0..LEN {
            assert!(LaunchDecl::decode(&bytes[..cut]).is_err());
        }
    }
    assert!(LaunchDecl::default().is_empty());
    assert!(LaunchDecl {
        grid_dims: 1,
        ..LaunchDecl::default()
    }
    .is_empty());
    assert!(!cases[1].is_empty());
    assert_eq!(cases[2].fixed_block(), Some([16, 16, 1]));
    assert_eq!(cases[1].fixed_block(), None);
    // The layout, byte by byte.
    assert_eq!(
        cases[2].encode(),
        [b'F', b'C', b'L', b'5', 0, 0, 16, 0, 16, 0, 1, 0, 11, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(cases[4].encode()[14], 2);
    assert_eq!(cases[5].encode()[15], 1);
    assert!(!cases[5].is_empty());
    let mut odd = cases[5].encode();
    odd[15] = 2;
    assert!(LaunchDecl::decode(&odd).is_err());
    assert!(!LaunchDecl {
        max_threads: 64,
        min_blocks: 1,
        ..LaunchDecl::default()
    }
    .is_empty());
}

#[test]
fn invalid_declarations_are_refused() {
    let bad = [
        LaunchDecl {
            max_threads: 1025,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [16, 0, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [2048, 1, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [1, 1, 65],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [64, 32, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [16, 16, 1],
            max_threads: 256,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            dynamic_shared: 99,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            grid_dims: 4,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            grid_dims: 2,
            grid_rows: true,
            ..LaunchDecl::default()
        },
        // min_blocks without a bound, beyond 32 blocks, beyond 2048 threads per SM.
        LaunchDecl {
            min_blocks: 1,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            max_threads: 32,
            min_blocks: 33,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            block: [32, 32, 1],
            min_blocks: 3,
            ..LaunchDecl::default()
        },
        // A cluster with a zero extent, beyond 8 blocks (portable), beyond 16; the
        // non-portable flag without a cluster.
        LaunchDecl {
            cluster: [2, 0, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cluster: [3, 3, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cluster: [17, 1, 1],
            non_portable_cluster: true,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            non_portable_cluster: true,
            ..LaunchDecl::default()
        },
        // Cooperative with a cluster, with an N-D or per-row automatic grid.
        LaunchDecl {
            cooperative: true,
            cluster: [2, 1, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cooperative: true,
            grid_dims: 2,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cooperative: true,
            grid_rows: true,
            ..LaunchDecl::default()
        },
    ];
    for d in bad {
        assert!(d.check().is_err(), "{d:?}");
        // A record with an invalid declaration (written by hand) does not decode.
        let mut bytes = LaunchDecl::default().encode();
        bytes[4..6].copy_from_slice(&d.max_threads.to_le_bytes());
        for (i, b) in d.block.iter().enumerate() {
            bytes[6 + 2 * i..8 + 2 * i].copy_from_slice(&b.to_le_bytes());
        }
        bytes[12] = d.dynamic_shared;
        bytes[13] = d.grid_dims;
        bytes[14] = d.min_blocks;
        bytes[15] = d.grid_rows as u8;
        bytes[16] = d.cooperative as u8 | (d.non_portable_cluster as u8) << 1;
        bytes[17..20].copy_from_slice(&d.cluster);
        assert!(LaunchDecl::decode(&bytes).is_err(), "{d:?}");
    }
    let mut bytes = LaunchDecl::default().encode();
    bytes[0] = b'X';
    assert_eq!(LaunchDecl::decode(&bytes), Err("bad launch record magic"));
    // Unknown flag bits are refused (a newer writer's option this reader would ignore).
    let mut bytes = LaunchDecl::default().encode();
    bytes[16] = 4;
    assert!(LaunchDecl::decode(&bytes).is_err());
}

#[test]
fn cooperative_and_cluster_records() {
    let cases = [
        LaunchDecl {
            cooperative: true,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cooperative: true,
            max_threads: 256,
            min_blocks: 2,
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cluster: [2, 1, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cluster: [2, 2, 2],
            block: [128, 1, 1],
            ..LaunchDecl::default()
        },
        LaunchDecl {
            cluster: [16, 1, 1],
            non_portable_cluster: true,
            ..LaunchDecl::default()
        },
    ];
    for d in cases {
        assert!(!d.is_empty(), "{d:?}");
        let bytes = d.encode();
        assert_eq!(bytes.len(), LEN);
        assert_eq!(LaunchDecl::decode(&bytes), Ok(d));
    }
    assert_eq!(cases[0].encode()[16], 1);
    assert_eq!(cases[4].encode()[16], 2);
    assert_eq!(&cases[3].encode()[17..20], &[2, 2, 2]);
    assert_eq!(cases[2].cluster_dims(), Some([2, 1, 1]));
    assert_eq!(cases[3].cluster_size(), 8);
    assert_eq!(cases[0].cluster_dims(), None);
    assert_eq!(cases[0].cluster_size(), 0);
    assert_eq!(cases[2].max_cluster_size(), MAX_CLUSTER_PORTABLE);
    assert_eq!(cases[4].max_cluster_size(), MAX_CLUSTER_NON_PORTABLE);
}

#[test]
fn shared_bytes_travel_and_the_v4_record_decodes() {
    let d = LaunchDecl {
        block: [384, 1, 1],
        min_blocks: 1,
        shared_bytes: 197_696,
        ..LaunchDecl::default()
    };
    let bytes = d.encode();
    assert_eq!(
        u32::from_le_bytes(bytes[20..24].try_into().unwrap()),
        197_696
    );
    assert_eq!(LaunchDecl::decode(&bytes), Ok(d));
    #[cfg(feature = "std")]
    assert_eq!(LaunchSpec::from(d).decl(), Ok(d));
    // The same declaration as the previous version wrote it ("FCL4", 20 bytes, no
    // shared_bytes).
    let mut v4: [u8; LEN_V4] = bytes[..LEN_V4].try_into().unwrap();
    v4[..4].copy_from_slice(&MAGIC_V4);
    assert_eq!(
        LaunchDecl::decode(&v4),
        Ok(LaunchDecl {
            shared_bytes: 0,
            ..d
        })
    );
    let too_much = LaunchDecl {
        shared_bytes: MAX_SHARED_BYTES + 1,
        ..LaunchDecl::default()
    };
    assert!(too_much.check().is_err());
}

#[test]
fn the_earlier_record_still_decodes() {
    // A record as the previous version wrote it ("FCL3", 16 bytes): block (16, 16, 1),
    // float32 dynamic shared memory, a 2-D automatic grid.
    let old: [u8; LEN_V3] = [
        b'F', b'C', b'L', b'3', 0, 0, 16, 0, 16, 0, 1, 0, 11, 2, 0, 0,
    ];
    let d = LaunchDecl::decode(&old).unwrap();
    assert_eq!(
        d,
        LaunchDecl {
            block: [16, 16, 1],
            dynamic_shared: DType::F32 as u8,
            grid_dims: 2,
            ..LaunchDecl::default()
        }
    );
    assert!(!d.cooperative && d.cluster_dims().is_none());
    // Its own rules still apply, and each magic needs its own length.
    let mut bad = old;
    bad[15] = 3;
    assert!(LaunchDecl::decode(&bad).is_err());
    let mut v3_long = [0u8; LEN];
    v3_long[..LEN_V3].copy_from_slice(&old);
    assert_eq!(
        LaunchDecl::decode(&v3_long),
        Err("launch record has the wrong length")
    );
    let mut v4_short = old;
    v4_short[3] = b'4';
    assert_eq!(
        LaunchDecl::decode(&v4_short),
        Err("launch record has the wrong length")
    );
    let mut unknown = old;
    unknown[3] = b'9';
    assert_eq!(LaunchDecl::decode(&unknown), Err("bad launch record magic"));
}
