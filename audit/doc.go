// Package audit reads the audit and proves it has not been tampered with. The store writes the
// audit — every tool call and every approval transition, in the transaction of what caused it —
// as hash chains (store.AuditRecord.Hash and Link); this package:
//
//   - seals the records a store wrote to be sealed after their commit ([Sealer], run by serve:
//     see store.Audit.SealAudit), and derives the store's audit key ([MACKeyFromMaster]);
//   - signs checkpoints of every chain's head with the bot's own key ([Checkpointer], run by
//     serve), each naming the checkpoint before it;
//   - verifies the chains and the checkpoints ([Verify]), naming the first record changed,
//     removed, inserted or reordered, and one record in its place ([VerifyRecord], for
//     receipts);
//   - lists and follows the records with the story of their approval ([Reader]), never with
//     argument values.
//
// It does not write audit rows (the store does) nor decide what is recorded (packages toolcall
// and approvals do). The bot's key ([KeyFromMaster]) is derived from the DIDComm master key
// (PACKBOT_DIDCOMM_KEY), so every replica holding it signs as the same did:key.
//
//	key, _ := audit.KeyFromMaster(master)
//	rep, err := audit.Verify(ctx, st, audit.Options{Signer: key.DID()})
//	if err == nil && !rep.OK() {
//		fmt.Println(rep.Problems[0])
//	}
package audit
