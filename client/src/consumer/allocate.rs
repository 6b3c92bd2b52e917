//! Queue allocation in clustering mode: RocketMQ's `AllocateMessageQueueAveragely`. Every
//! member computes the same answer from the same sorted queue list and the same sorted
//! member list (the broker's), so the members split the queues without talking.

/// The queues `me` owns: `queues` (sorted) cut into `members.len()` contiguous ranges, the
/// first `queues % members` ranges one longer. Empty if `me` is not a member; with more
/// members than queues the last members get nothing.
pub fn allocate_average<Q: Clone>(queues: &[Q], members: &[String], me: &str) -> Vec<Q> {
    let Some(index) = members.iter().position(|m| m == me) else {
        return Vec::new();
    };
    let (n, m) = (queues.len(), members.len());
    if n == 0 {
        return Vec::new();
    }
    let rem = n % m;
    let size = if n <= m {
        1
    } else if rem > 0 && index < rem {
        n / m + 1
    } else {
        n / m
    };
    let start = if rem > 0 && index < rem {
        index * size
    } else {
        index * size + rem
    };
    let range = size.min(n.saturating_sub(start));
    queues.iter().skip(start).take(range).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn every_queue_once() {
        for queues in 0..12usize {
            for n in 1..6usize {
                let qs: Vec<usize> = (0..queues).collect();
                let ms = members(n);
                let mut all: Vec<usize> = ms
                    .iter()
                    .flat_map(|m| allocate_average(&qs, &ms, m))
                    .collect();
                all.sort();
                assert_eq!(all, qs, "{queues} queues, {n} members");
            }
        }
    }

    #[test]
    fn rocketmq_shape() {
        let qs: Vec<u32> = (0..8).collect();
        let ms = members(3);
        assert_eq!(allocate_average(&qs, &ms, "c0"), vec![0, 1, 2]);
        assert_eq!(allocate_average(&qs, &ms, "c1"), vec![3, 4, 5]);
        assert_eq!(allocate_average(&qs, &ms, "c2"), vec![6, 7]);
        assert!(allocate_average(&qs, &ms, "stranger").is_empty());
        let few: Vec<u32> = (0..2).collect();
        assert_eq!(allocate_average(&few, &ms, "c2"), Vec::<u32>::new());
    }
}
