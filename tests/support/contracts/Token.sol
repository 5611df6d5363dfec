// SPDX-License-Identifier: MIT
// A minimal, standard ERC-20 for the tests (tests/support/erc20.py compiles it with solc from
// npm). Semantics follow OpenZeppelin's ERC20 (v5): transfer and transferFrom revert on a
// short balance or allowance, an allowance of type(uint256).max is never spent, every move of
// tokens (mint included, from the zero address) emits Transfer(from, to, value), approve emits
// Approval. Two test-only additions: mint (anyone may mint: this is a test token) and
// transferMany, several Transfer logs in one receipt (log indexes in a proof).
pragma solidity ^0.8.20;

contract Token {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed);
    error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed);
    error ERC20InvalidReceiver(address receiver);
    error ERC20InvalidSender(address sender);
    error ERC20InvalidSpender(address spender);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            if (allowed < value) revert ERC20InsufficientAllowance(msg.sender, allowed, value);
            unchecked {
                allowance[from][msg.sender] = allowed - value;
            }
        }
        _transfer(from, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        if (spender == address(0)) revert ERC20InvalidSpender(address(0));
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    /// Test-only: mint ``value`` to ``to`` (a Transfer from the zero address).
    function mint(address to, uint256 value) external {
        if (to == address(0)) revert ERC20InvalidReceiver(address(0));
        totalSupply += value;
        unchecked {
            balanceOf[to] += value;
        }
        emit Transfer(address(0), to, value);
    }

    /// Test-only: one transfer per (to, value) pair, each its own Transfer log.
    function transferMany(address[] calldata to, uint256[] calldata values) external returns (bool) {
        require(to.length == values.length, "lengths differ");
        for (uint256 i = 0; i < to.length; i++) {
            _transfer(msg.sender, to[i], values[i]);
        }
        return true;
    }

    function _transfer(address from, address to, uint256 value) internal {
        if (from == address(0)) revert ERC20InvalidSender(address(0));
        if (to == address(0)) revert ERC20InvalidReceiver(address(0));
        uint256 balance = balanceOf[from];
        if (balance < value) revert ERC20InsufficientBalance(from, balance, value);
        unchecked {
            balanceOf[from] = balance - value;
            balanceOf[to] += value;
        }
        emit Transfer(from, to, value);
    }
}
