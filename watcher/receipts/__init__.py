"""Signed receipts: issuing them as settlements become terminal, building their proofs.

``component`` (the ReceiptIssuer: which receipts are due, signing, storing, revoking) uses
``builder`` (a chain settlement's receipt: inclusion proofs and the header chain, with
``headers``), ``sources`` (receipts of off-chain sources), ``attestation`` (the
registration facts a receipt binds) and ``signer`` (the signing key). Import the
submodules by their full path (this file imports nothing).
"""
